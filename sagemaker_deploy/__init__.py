"""Deploy the image to a SageMaker real-time endpoint with boto3: plan, deploy, invoke, update, delete.

`python -m sagemaker_deploy --help`. The resolver runs locally first (`plan`), so a configuration the
container would refuse stops before anything is created in AWS.
"""
