"""TensorFlow clusters, one process per task: `placement cluster` (launch, supervisor, watch),
`placement trace --cluster` (trace and its trace_* modules) and asking a running cluster (inspect)."""
