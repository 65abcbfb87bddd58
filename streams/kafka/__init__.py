"""Kafka plumbing that every faust app here shares (the worker and the OTel bridge):
admin, topics, outputs, dead letters, expiry, and `faust_ext`, every workaround of faust
and aiokafka internals."""
