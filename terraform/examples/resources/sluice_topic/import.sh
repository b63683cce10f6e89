# A topic is imported by its name.
terraform import sluice_topic.orders orders
