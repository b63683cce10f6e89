resource "sluice_topic" "orders" {
  name       = "orders"
  partitions = 6

  # Only the settings you set are tracked; the rest keep the service's
  # defaults (see effective_config).
  config = {
    "retention.ms"      = "259200000" # 3 days
    "max.message.bytes" = "524288"
  }
}
