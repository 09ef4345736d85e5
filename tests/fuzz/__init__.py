"""Protocol fuzzing and crash loops against a broker subprocess: mutated real-client frames, SIGKILL restarts."""
