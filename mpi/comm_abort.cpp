#include "mpi/comm_abort.h"

namespace tp {

std::shared_ptr<CommAborts> process_comm_aborts() {
  static const std::shared_ptr<CommAborts> aborts = std::make_shared<CommAborts>();
  return aborts;
}

}  // namespace tp
