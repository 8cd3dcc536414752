"""Authentication: the SASL mechanisms (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER) as server-side
exchanges and as clients, the JAAS config syntax they are configured with, and the credentials
SCRAM stores. Nothing here touches a socket: the network layer feeds the exchanges the bytes of
SaslAuthenticate requests (docs/security.md)."""
