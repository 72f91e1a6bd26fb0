"""Live global explanations, drift alarms and their plots (no Kafka)."""
