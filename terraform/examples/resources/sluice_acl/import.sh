# An ACL is imported by its id (GET /v1/acls lists them).
terraform import sluice_acl.orders_read <acl id>
