"""What a person reads: the Markdown report, the plots, the terminal lines."""
