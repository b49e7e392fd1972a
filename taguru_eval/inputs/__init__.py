"""The run's inputs: eval.jsonl, the thresholds file, config and URL, and run preparation."""
