"""Two-party protocols written against a Channel. Never imports grpc."""
