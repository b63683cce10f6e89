# A key for a Kafka client. Changing any attribute creates a new key and
# revokes the old one; create_before_destroy makes the new key exist first,
# so both work while clients move over.
resource "sluice_api_key" "orders_service" {
  description = "orders service, rotated 2026-11"
  role        = "client"

  lifecycle {
    create_before_destroy = true
  }
}

output "orders_service_sasl_username" {
  value = sluice_api_key.orders_service.id
}

output "orders_service_sasl_password" {
  value     = sluice_api_key.orders_service.secret
  sensitive = true
}
