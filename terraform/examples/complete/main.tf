# A service's whole footprint on Sluice: its topic, a key that can be
# rotated without downtime, the ACLs it needs and where to connect.
# The provider reads SLUICE_ENDPOINT, SLUICE_API_KEY_ID and
# SLUICE_API_KEY_SECRET (an admin key of the tenant).
# The provider's acceptance tests apply this file as it is.

terraform {
  required_providers {
    sluice = {
      source = "sluicehq/sluice"
    }
  }
}

provider "sluice" {}

resource "sluice_topic" "orders" {
  name       = "orders"
  partitions = 6
  config = {
    "retention.ms" = "259200000"
  }
}

resource "sluice_api_key" "orders_service" {
  description = "orders service"
  role        = "client"

  lifecycle {
    create_before_destroy = true
  }
}

resource "sluice_acl" "orders_write" {
  principal     = sluice_api_key.orders_service.id
  resource_type = "topic"
  resource_name = sluice_topic.orders.name
  operation     = "write"

  lifecycle {
    create_before_destroy = true
  }
}

resource "sluice_acl" "orders_groups" {
  principal     = sluice_api_key.orders_service.id
  resource_type = "group"
  resource_name = "orders-"
  pattern_type  = "prefixed"
  operation     = "read"

  lifecycle {
    create_before_destroy = true
  }
}

data "sluice_cluster" "this" {}

output "bootstrap_servers" {
  value = join(",", data.sluice_cluster.this.bootstrap_servers)
}

output "sasl_username" {
  value = sluice_api_key.orders_service.id
}

output "sasl_password" {
  value     = sluice_api_key.orders_service.secret
  sensitive = true
}
