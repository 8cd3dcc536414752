"""Coordinators: consumer groups and committed offsets (group_coordinator), producer ids
(producer_id_manager)."""
