"""Reading test cases out of an uploaded document.

The pipeline, in the order a file meets it:

  validation.py  size, type by content (magic bytes), OOXML archive sanity, file names
  sandbox.py     runs the parse in a separate, resource-limited Python process (child.py)
  readers.py     PDF/DOCX/XLSX/XLS/CSV/Markdown -> tables with row numbers + prose with page numbers
                 (CSV and text decoding in text_files.py, Markdown in markdown.py, Parsed in parsed.py)
  reading.py     what the sandbox read, as JSON kept on Document.reading, and the cases it
                 holds under a mapping (in the job, in-process; in the child's extract mode)
  tables.py      header row detection and synonyms -> cases, deterministically
  prose.py       labelled "Question:/Expected answer:" pairs, and text chunks for the model
  llm_cases.py   the model reads cases out of prose chunks (through evalsite.llm)
  dedupe.py      exact and near-duplicate removal
  preview.py     HTML-ready blocks for the document preview dialog
  services.py    dataset_upload_create / dataset_extract: the only code that writes

Everything the child process imports (readers, reading, tables, prose, dedupe, preview, errors)
is plain Python with no Django, so the child starts fast and touches no database.
"""
