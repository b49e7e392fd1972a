"""Text, strict JSON, name folding, atomic files, extras: nothing of the project imported."""
