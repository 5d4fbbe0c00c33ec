from tfadvisor.cli.process import main

main()
