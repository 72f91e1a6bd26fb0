"""What leaves prefstream: records fitted to their topic (publish) and followed (tail)."""
