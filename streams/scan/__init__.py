"""Offline detection: the scanner over recorded events and the transcript converters."""
