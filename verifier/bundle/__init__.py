"""Reading a public bundle, from a directory or a .tar.gz, without trusting it."""
