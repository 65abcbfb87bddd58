"""loopwatch stream processing: the detector core, the faust app, the runtime client."""
