"""The ground every layer stands on: the project's settings and safe file writing."""
