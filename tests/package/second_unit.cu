// A second translation unit that includes the umbrella header too: the consumer links it with consumer.cu, so a
// kernel defined in a header without being a template (one definition per unit) fails this test at link time.
#include <hawk/hawk.cuh>

int hawk_second_unit_status_code() { return static_cast<int>(hawk::StatusCode::kSuccess); }
