"""Coordinators: groups (group_coordinator for the classic protocol, consumer_group_coordinator
for KIP-848's consumer groups, share_group_coordinator for KIP-932's share groups' membership;
their metadata and committed offsets in __consumer_offsets: group_metadata_manager),
transactions (transaction_coordinator), producer ids (producer_id_manager)."""
