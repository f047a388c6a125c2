"""Ingestion: files and pages in; documents, sections, chunks and their vectors out."""
