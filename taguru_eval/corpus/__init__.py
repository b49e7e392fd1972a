"""Context folders: the data layout ``serve DIR`` serves and ``load`` writes to a server.

One reader for both sides (``folder.py``): the reference server fills its state
from it, and ``load`` sends the same write requests over HTTP (``writes.py``
turns a folder into them, batched under the caps it is given). The paragraph
split and the heading rule (``paragraphs.py``) are the ones the reference
server stores text with, so a marker sent is a marker kept.

Nothing here talks to a server or imports the reference server: it reads files
and builds request bodies.
"""
