"""evaluation.json (EVALUATE.md §6): written from the score frames, and read back."""
