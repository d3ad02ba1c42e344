"""The query API: HTTP reads of the views, never the write path (the package's docstring says what each
folder may import)."""
