"""A server process's ingestion jobs and nothing else, for ``test_job_crash.py``: the HTTP
service's own runner (``api/deps.Services``) on the store at ``argv[1]`` with leases of
``argv[2]`` seconds. It prints its runner's token, then runs the tenants' jobs until killed.

    python -m tests.job_process URL LEASE_S
"""

from __future__ import annotations

import sys
import time

from citewise.api.services import Services
from citewise.api.settings import Settings


def main() -> None:
    settings = Settings(db=sys.argv[1], admin_key="admin-" + "x" * 32,  # type: ignore[arg-type]
                        embedder="hashing:64", job_lease_s=float(sys.argv[2]))
    services = Services(settings)
    print(services.jobs.runner, flush=True)
    services.jobs.resume()
    while True:
        time.sleep(60)


if __name__ == "__main__":
    main()
