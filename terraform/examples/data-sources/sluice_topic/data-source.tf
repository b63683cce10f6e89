data "sluice_topic" "payments" {
  name = "payments"
}

output "payments_retention_ms" {
  value = data.sluice_topic.payments.effective_config["retention.ms"]
}
