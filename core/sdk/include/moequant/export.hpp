// Symbol visibility for the moequant SDK.
//
// The SDK library and every plugin are built with hidden visibility; only what is marked
// MOEQUANT_API is exported from libmoequant_sdk. Interface classes and moequant::Error are
// exported so their type_info is unique across the host and all plugins.
#pragma once

#if defined(_WIN32)
#error "moequant targets ELF platforms (Linux) only"
#endif

#define MOEQUANT_API __attribute__((visibility("default")))
