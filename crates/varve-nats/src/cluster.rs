//! A local `nats-server` cluster on loopback (written by a helper).
