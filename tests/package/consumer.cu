// Uses the installed headers the way a user would: the umbrella header and a host-side call.
#include <hawk/hawk.cuh>

#include <cstdio>

int hawk_second_unit_status_code();  // second_unit.cu, which includes hawk.cuh as well

int main() {
  if (hawk_second_unit_status_code() != static_cast<int>(hawk::StatusCode::kSuccess)) return 1;
  const hawk::Status status(hawk::StatusCode::kInvalidArgument, "consumer built against an installed hawk");
  std::printf("%s\n", status.to_string().c_str());
  return status.ok() ? 1 : 0;
}
