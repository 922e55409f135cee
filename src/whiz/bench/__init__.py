"""Benchmarks: programs that print a table for people and end with one JSON line for scripts."""
