# A key is imported by its id. Its secret cannot be imported: it is shown
# only once, when the key is created.
terraform import sluice_api_key.orders_service <key id>
