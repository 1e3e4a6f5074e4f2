"""The documentation site's generated pages (``make docs``): references built from the code.

``docsgen.hooks`` is the MkDocs hook that replaces each ``<!-- generate: NAME -->`` line of a
page by :func:`docsgen.reference.render`'s output, so a reference cannot drift from the code
it describes. Not part of the ``noti`` package (it is not installed).
"""
