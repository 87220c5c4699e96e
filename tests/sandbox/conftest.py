"""tests/sandbox: testinfra checks of the hosts (test_hosts.py) and, from the controller, fault injection
(faults/) and firewall tests (firewall/) against the running sandbox. This file puts live.py on the path."""
