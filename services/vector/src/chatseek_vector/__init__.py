"""chatseek vector service: sqlite-vec KNN partitioned by chat."""
