"""What the user configured: serving.properties, OPTION_* and SageMaker/TGI variables, the LMI option tables."""
