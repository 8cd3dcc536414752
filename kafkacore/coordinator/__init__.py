"""Coordinators: consumer groups (group_coordinator; their metadata and committed offsets in
__consumer_offsets: group_metadata_manager), transactions (transaction_coordinator), producer
ids (producer_id_manager)."""
