"""Protocol buffer definitions of the party service and their generated stubs."""
