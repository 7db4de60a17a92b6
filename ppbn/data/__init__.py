"""A party's files: reading and checking its CSV against the schema, schema tools, the
data sets made from reference networks, mechanism files, and outputs never half-written."""
