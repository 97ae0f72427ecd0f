// The built-in model profile catalog: the architectures of docs/models.md with serving defaults.
#ifndef KVLEDGER_LIB_PROFILES_BUILTIN_CATALOG_H_
#define KVLEDGER_LIB_PROFILES_BUILTIN_CATALOG_H_

#include "kvledger/v1/profile.pb.h"

namespace kvledger {

// Name of the profile used for unknown models when the operator opted in (--unknown_model=generic).
inline constexpr char kGenericProfileName[] = "generic";

// The catalog as a text proto, the same format a --profiles file uses.
const char* BuiltinCatalogText();

// Parsed catalog. Parsing a compiled-in constant cannot fail for a built binary; a test checks it.
v1::ProfileCatalog BuiltinCatalog();

}  // namespace kvledger

#endif  // KVLEDGER_LIB_PROFILES_BUILTIN_CATALOG_H_
