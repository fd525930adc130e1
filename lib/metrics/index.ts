export {
  METRIC_PREFIX,
  MODEL_CALL_DURATION_BUCKETS_S,
  createMetrics,
  metrics,
  processMetrics,
  type BoundedMetrics,
  type CountStuckByKind,
  type MetricsOptions,
  type ObservedCall,
} from "./metrics";
export {
  readWorkerSnapshots,
  renderMetrics,
  snapshotKey,
  startMetricsPublisher,
  type MetricsPublisherOptions,
  type MetricsSnapshot,
} from "./publish";
