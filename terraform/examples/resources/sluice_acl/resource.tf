# Let the orders service read the orders topic and commit offsets in its
# consumer groups. Give ACLs that name a rotated key create_before_destroy
# too, so the old key keeps its rights until it is revoked.
resource "sluice_acl" "orders_read" {
  principal     = sluice_api_key.orders_service.id
  resource_type = "topic"
  resource_name = sluice_topic.orders.name
  operation     = "read"

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
