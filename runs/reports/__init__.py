"""Reports: a run as a file (JSON, CSV, XLSX, the HTML report), its charts, tool diagnostics
and rule coverage's verdicts."""
