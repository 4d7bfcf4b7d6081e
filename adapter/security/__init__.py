"""Authentication (SASL PLAIN / SCRAM, TLS) and authorization (ACLs) at the protocol edge.

Who is asking is a :class:`~.principal.Session` per connection; what they may do is the
:class:`~.authorizer.Authorizer`'s answer over the ACLs in :class:`~.acls.AclStore`. Both
follow Kafka's rules (StandardAuthorizer, ScramSaslServer, PlainSaslServer), since clients
and their users expect Kafka's answers.
"""
