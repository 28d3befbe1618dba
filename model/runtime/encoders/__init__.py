"""Sentence encoders: trees, sequences or characters → a vector in the joint space."""
