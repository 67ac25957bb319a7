// The exported plugin descriptor of mesh-transport-nats.so. Kept apart from nats_transport.cpp so
// tests can link the class without the exported symbol.
#include "mesh/sdk/plugin.h"
#include "nats_transport.h"

MESH_PLUGIN(transport, "nats", "0.1.0",
            "NATS transport (nats.c): pub/sub, request/reply, headers, unlimited reconnect",
            mesh::transports::nats::NatsTransport)
