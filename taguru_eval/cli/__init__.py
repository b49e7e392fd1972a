"""The command line: argument parsing, help texts, exit codes and stderr lines.

Every module here is a thin shell over the library; :mod:`.main` dispatches."""
