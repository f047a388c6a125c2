"""Front ends: the Streamlit research console (``console.py``) and the chat widget
(``static/widget.js``, served by the API at ``/widget.js``)."""
